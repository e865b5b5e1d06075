"""The audit log's file: records appended whole, rotated before a line would pass the
cap with the oldest file going, a line cut short left on its own, a readable log made
private again, and a file that is not mcpd's own refused before a byte is written."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.audit.logfile import FILE_NAME, LogFile
from mcpd.local.state.privatefile import UnsafeFileError


def record(n: int) -> bytes:
    return f'{{"n":{n:03d}}}\n'.encode()  # 10 bytes


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def log(state: Path) -> Iterator[LogFile]:
    file = LogFile(str(state))
    yield file
    file.close()


def files(state: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(state.iterdir()) if p.is_file()}


def test_records_are_appended_to_a_private_file(state: Path, log: LogFile) -> None:
    log.append(record(1), 100, 3)
    log.append(record(2) + record(3), 100, 3)
    assert files(state) == {FILE_NAME: record(1) + record(2) + record(3)}
    assert stat.S_IMODE((state / FILE_NAME).stat().st_mode) == 0o600
    assert log.taken == 20


def test_the_log_rotates_before_a_line_would_pass_its_cap_and_the_oldest_goes(
    state: Path, log: LogFile, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "mcpd.audit"):
        log.append(record(1) + record(2), 20, 2)  # exactly at the cap: no rotation
        assert files(state) == {FILE_NAME: record(1) + record(2)}
        log.append(record(3), 20, 2)
        assert files(state) == {FILE_NAME: record(3), f"{FILE_NAME}.1": record(1) + record(2)}
        log.append(record(4) + record(5) + record(6), 20, 2)
        assert files(state) == {
            FILE_NAME: record(5) + record(6),
            f"{FILE_NAME}.1": record(3) + record(4),
            f"{FILE_NAME}.2": record(1) + record(2),
        }
        assert caplog.records == []  # rotated, but no record gone yet
        os.utime(state / f"{FILE_NAME}.2", (0, 0))  # its last record's time
        log.append(record(7) + record(8) + record(9) + record(10), 20, 2)
    assert files(state) == {
        FILE_NAME: record(9) + record(10),
        f"{FILE_NAME}.1": record(7) + record(8),
        f"{FILE_NAME}.2": record(5) + record(6),
    }
    # Said once for the two files gone, with the time the first was last written.
    [gone] = [r.getMessage() for r in caplog.records]
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(0))
    assert gone == (
        f"audit records written up to {until} were rotated away with the oldest of 2 files; "
        "to keep more, raise audit_max_bytes or audit_files"
    )


def test_a_line_cut_short_by_a_crash_stays_on_its_own(state: Path, log: LogFile) -> None:
    (state / FILE_NAME).write_bytes(b'{"cut')
    (state / FILE_NAME).chmod(0o600)
    log.append(record(1), 100, 2)
    assert (state / FILE_NAME).read_bytes() == b'{"cut\n' + record(1)


def test_a_log_others_may_read_is_made_private_again_with_a_warning(
    state: Path, log: LogFile, caplog: pytest.LogCaptureFixture
) -> None:
    (state / FILE_NAME).write_bytes(record(1))
    (state / FILE_NAME).chmod(0o644)
    with caplog.at_level(logging.WARNING, "mcpd.audit"):
        log.append(record(2), 100, 2)
    assert stat.S_IMODE((state / FILE_NAME).stat().st_mode) == 0o600
    assert "could be read by other users (mode 0644); made it 0600 again" in caplog.text
    assert (state / FILE_NAME).read_bytes() == record(1) + record(2)


def test_a_directory_at_an_older_name_is_left_and_named_and_rotation_goes_around_it(
    state: Path, log: LogFile, caplog: pytest.LogCaptureFixture
) -> None:
    (state / f"{FILE_NAME}.1").mkdir()
    log.append(record(1), 10, 3)
    with caplog.at_level(logging.WARNING, "mcpd.audit"):
        log.append(record(2), 10, 3)
    assert files(state) == {FILE_NAME: record(2), f"{FILE_NAME}.2": record(1)}
    assert f"{state}/{FILE_NAME}.1 is a directory" in caplog.text


def test_a_log_that_cannot_be_moved_grows_past_its_cap_and_says_so_once(
    state: Path, log: LogFile, caplog: pytest.LogCaptureFixture
) -> None:
    (state / f"{FILE_NAME}.1").mkdir()
    with caplog.at_level(logging.WARNING, "mcpd.audit"):
        for n in range(4):
            log.append(record(n), 10, 1)
    assert files(state) == {FILE_NAME: b"".join(record(n) for n in range(4))}
    assert caplog.text.count("cannot be rotated; records go on being added") == 1


def test_a_link_at_the_name_is_refused_and_what_it_points_to_left_alone(
    state: Path, tmp_path: Path, log: LogFile
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"theirs\n")
    (state / FILE_NAME).symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="is a symbolic link"):
        log.append(record(1), 100, 2)
    assert elsewhere.read_bytes() == b"theirs\n"


def test_a_second_name_of_another_file_is_refused(
    state: Path, tmp_path: Path, log: LogFile
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"theirs\n")
    elsewhere.chmod(0o600)
    os.link(elsewhere, state / FILE_NAME)
    with pytest.raises(UnsafeFileError, match="has 2 hard links") as info:
        log.append(record(1), 100, 2)
    assert "mcpd writes no record to it until it is removed" in str(info.value)
    assert elsewhere.read_bytes() == b"theirs\n"


def test_a_fifo_at_the_name_does_not_hold_the_writer(state: Path, log: LogFile) -> None:
    os.mkfifo(state / FILE_NAME, 0o600)
    with pytest.raises(UnsafeFileError, match="is not a regular file \\(a FIFO"):
        log.append(record(1), 100, 2)
