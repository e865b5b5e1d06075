"""The agents' Unix socket: bound with its mode (and group) already set, never stealing
nor taking the place of another user's socket file, and removed on the way out only if
it is still the one we bound.

It is bound only in a directory where nobody but the daemon's user and root can put
another socket in its place. The path is followed as written, one name at a time:
every directory on the way must belong to one of them and be writable by nobody else
(a sticky one such as /tmp, where only an entry's owner may remove or rename it, is
fine), and every symbolic link must be theirs too, or its owner could point it
elsewhere whenever they like. Missing directories are made, the last one private, or
0755 when the socket's own mode lets others in. The socket file is removed from the
directory it was bound in, held open meanwhile, whatever the path names by then.

A socket can also be made ready beside its path (``stage_unix``) and put in place later,
over one of ours listening there, with no moment where the path names nothing that
another could bind (a reload's rebinding, ``sockets``). What is at that temporary name
is checked as the path is: only a socket mcpd's user left there is removed. Binding
needs no event loop: ``mcpd serve`` binds before it loads one (``starting.listening``).
"""

from __future__ import annotations

import contextlib
import os
import socket as stdsocket
import stat
from collections import deque
from typing import TYPE_CHECKING

from ...config.checks.strings import MAX_SOCKET_PATH
from ...config.tables.model import EX_CONFIG
from ...local.ownership.owners import user_name
from ...starting.cannot_start import DaemonError

if TYPE_CHECKING:
    import trio


class UnsafeDirectory(DaemonError):
    """Someone else could replace the socket: a place to change, as a config error is."""

    # Starting again changes nothing (systemd does not restart on 78): the socket has
    # to go elsewhere, or the directory has to be put right.
    exit_code = EX_CONFIG


class UnusableSocketFile(DaemonError):
    """A socket file at the path that mcpd may not, or cannot, replace, nor tell to be
    stale: the same on every start, so a place to change, as a config error is."""

    exit_code = EX_CONFIG


class SocketTaken(UnusableSocketFile):
    """Something listens at the path already: another mcpd, most likely."""


# As the kernel, which gives up on a path after this many links (ELOOP).
_MAX_LINKS = 40


class SocketFile:
    """A socket file we bound: its directory and itself (held open), its name and
    identity."""

    def __init__(self, dir_fd: int, name: str) -> None:
        self._dir_fd: int | None = dir_fd
        self._name = name
        # Held until removed: a file made in its place meanwhile cannot be given its inode
        # number, as ext4 gives a freed one to the next file made.
        self._held = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        st = os.fstat(self._held)
        self._ours = (st.st_dev, st.st_ino)

    def in_place(self) -> bool:
        """Whether its path still names this socket file (removed: no)."""
        return self._dir_fd is not None and self._in_place_at(self._dir_fd)

    def _in_place_at(self, dir_fd: int) -> bool:
        try:
            st = os.stat(self._name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._ours

    def remove(self) -> None:
        """Remove the socket file, unless another one (say mcpd.socket's) has taken its
        place since; once."""
        fd, self._dir_fd = self._dir_fd, None
        if fd is None:
            return
        try:
            if self._in_place_at(fd):
                with contextlib.suppress(OSError):
                    os.unlink(self._name, dir_fd=fd)
        finally:
            os.close(fd)
            os.close(self._held)


class UnixBound:
    """A socket listening at ``path``, and the file that names it."""

    def __init__(self, path: str, mode: int, sock: stdsocket.socket, file: SocketFile) -> None:
        self.path = path
        self.mode = mode
        self.sock = sock
        self.file = file

    def listener(self) -> trio.SocketListener:
        """The socket for serving; it is the listener's from then on."""
        import trio  # here, not at the top: see the module's note

        return trio.SocketListener(trio.socket.from_stdlib_socket(self.sock))

    def close(self) -> None:
        self.file.remove()
        self.sock.close()


def bind_unix(path: str, mode: int, group: int | None = None) -> UnixBound:
    """A socket listening on ``path``, ``mode`` and ``group`` set, replacing a stale one."""
    return stage_unix(path, mode, group=-1 if group is None else group).publish()


def stage_unix(path: str, mode: int, ours: SocketFile | None = None, group: int = -1) -> Staged:
    """As ``bind_unix`` (``group`` -1: the user's own, as chown(2) reads it), beside
    ``path`` under a temporary name, to take its place on ``publish``: over ``ours``,
    still listening, at once (the path is never free for another to bind meanwhile);
    else what is there must be a stale socket or nothing."""
    directory, name = os.path.split(path)
    if not name:
        raise DaemonError(f"{path!r} names a directory, not a socket")
    try:
        real = safe_directory(directory or ".", 0o755 if mode & 0o077 else 0o700)
    except OSError as exc:
        raise DaemonError(
            f"cannot check or create the socket directory {directory!r}: {exc}"
        ) from None
    except UnsafeDirectory as exc:
        raise UnsafeDirectory(f"will not listen on {path}: {exc}") from None
    try:
        dir_fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise DaemonError(f"cannot open the socket directory {real}: {exc.strerror}") from None
    try:
        if ours is None or not ours.in_place():
            _refuse_live_socket(path)
        # Bound under a temporary name and renamed into place, so the socket is never
        # reachable with the umask's permissions instead of ``mode``.
        tmp = f".{name}.{os.getpid()}"
        address = _bind_address(path, directory, dir_fd, tmp)
        try:
            sock = stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
        except OSError as exc:
            raise DaemonError(f"cannot listen on {path!r}: {exc.strerror or exc}") from None
        try:
            _clear_leftover(path, dir_fd, os.path.join(directory, tmp))
            sock.bind(address)
            os.chown(tmp, -1, group, dir_fd=dir_fd, follow_symlinks=False)
            os.chmod(tmp, mode, dir_fd=dir_fd)
            sock.listen(512)
        except OSError as exc:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise DaemonError(f"cannot listen on {path!r}: {exc.strerror or exc}") from None
    except BaseException:
        os.close(dir_fd)
        raise
    return Staged(path, mode, sock, dir_fd, tmp)


def _bind_address(path: str, directory: str, dir_fd: int, tmp: str) -> str:
    """Where ``tmp`` is bound: through the directory opened and checked, short however
    long its path; else (no /proc, or that is longer) beside ``path``."""
    for at in (f"/proc/self/fd/{dir_fd}/{tmp}", os.path.join(directory, tmp)):
        if len(os.fsencode(at)) <= MAX_SOCKET_PATH and os.path.isdir(os.path.dirname(at) or "."):
            return at
    raise DaemonError(
        f"cannot listen on {path!r}: its temporary name {tmp!r} is too long for a Unix "
        f"socket's address (at most {MAX_SOCKET_PATH} bytes): shorten the socket's file name"
    )


def _clear_leftover(path: str, dir_fd: int, tmp: str) -> None:
    """Nothing at the temporary name ``tmp`` but what an mcpd of this process id left
    (its socket, then removed); anything else there is refused, as at the path itself."""
    name = os.path.basename(tmp)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(st.st_mode) and _not_ours(tmp, st) is None:
        os.unlink(name, dir_fd=dir_fd)
        return
    raise UnusableSocketFile(
        f"cannot listen on {path}: the name it is bound under first, {tmp}, is taken "
        f"({describe(st)}); not replacing it: remove it or choose another socket path"
    )


class Staged:
    """A socket listening under a temporary name in its directory, not yet at its path."""

    def __init__(self, path: str, mode: int, sock: stdsocket.socket, dir_fd: int, tmp: str) -> None:
        self.path = path
        self.mode = mode
        self._sock = sock
        self._dir_fd: int | None = dir_fd
        self._tmp = tmp

    def publish(self) -> UnixBound:
        """The socket renamed to its path, over whatever is there; once."""
        fd, self._dir_fd = self._dir_fd, None
        assert fd is not None, "published or closed already"
        name = os.path.basename(self.path)
        try:
            os.rename(self._tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            return UnixBound(self.path, self.mode, self._sock, SocketFile(fd, name))
        except OSError as exc:
            self._sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self._tmp, dir_fd=fd)
            os.close(fd)
            raise DaemonError(f"cannot listen on {self.path!r}: {exc.strerror or exc}") from None
        except BaseException:
            self._sock.close()
            os.close(fd)
            raise

    def close(self) -> None:
        """Closed and its temporary name removed, unless published; again is a no-op."""
        fd, self._dir_fd = self._dir_fd, None
        if fd is None:
            return
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp, dir_fd=fd)
        os.close(fd)


def safe_directory(directory: str, mode: int) -> str:
    """The real path of ``directory``, made where missing (the last directory with
    ``mode``), once every name on the way there, as written, proved to be one that
    only this user and root can change; raises ``UnsafeDirectory`` saying which one
    is not."""
    todo = deque(os.path.join(os.getcwd(), directory).split("/"))
    at = "/"
    _check(at, os.lstat(at), last=not any(n not in ("", ".") for n in todo))
    links = 0
    while todo:
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            at = os.path.dirname(at)  # checked on the way down
            continue
        step = os.path.join(at, name)
        last = not any(n not in ("", ".") for n in todo)
        try:
            st = os.lstat(step)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(step, mode if last else 0o755)
            st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            problem = _not_ours(step, st)
            if problem is not None:
                raise UnsafeDirectory(
                    f"the symbolic link {problem}: its owner could point it elsewhere at "
                    "any time; remove it or choose another socket path"
                )
            links += 1
            if links > _MAX_LINKS:
                raise UnsafeDirectory(f"{directory} goes through too many symbolic links")
            target = os.readlink(step)
            if target.startswith("/"):
                at = "/"
            todo.extendleft(reversed(target.split("/")))
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeDirectory(f"{step} is not a directory")
        _check(step, st, last=last)
        at = step
    return at


def _not_ours(at: str, st: os.stat_result) -> str | None:
    """Why ``at`` (a directory or a link) belongs to someone who must not change it."""
    mine = os.geteuid()
    if st.st_uid in (mine, 0):
        return None
    allowed = "root" if mine == 0 else f"you (uid {mine}) or root"
    return f"{at} belongs to uid {st.st_uid} ({user_name(st.st_uid)}), not to {allowed}"


def _check(at: str, st: os.stat_result, *, last: bool) -> None:
    what = "the socket directory" if last else "a directory above the socket"
    problem = _not_ours(at, st)
    if problem is not None:
        raise UnsafeDirectory(
            f"{what} {problem}: its owner could put a socket of their own in mcpd's place; "
            "remove it or choose another socket path"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafeDirectory(
            f"{what} {at} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"anyone could put a socket of their own in mcpd's place; chmod go-w {at} "
            "or choose another socket path"
        )


def _refuse_live_socket(path: str) -> None:
    """Nothing at ``path``, once a stale socket file of ours there is removed; raises
    ``DaemonError`` if something else is there, or one that may be live."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DaemonError(f"cannot look at {path}: {exc.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise UnusableSocketFile(
            f"{path!r} ({describe(st)}; remove it or choose another socket path) exists "
            "and is not a socket; not replacing it"
        )
    probe = stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    # Not blocking: a listener whose queue is full answers at once that it is busy
    # (EAGAIN) rather than hold the probe until it accepts.
    probe.setblocking(False)
    try:
        probe.connect(path)
        raise SocketTaken(
            f"something already listens on {path} (another mcpd, or a program that took "
            f"its place; {describe(st)}); not replacing it"
        )
    except BlockingIOError:
        raise UnusableSocketFile(
            f"something listens on {path} ({describe(st)}) but does not answer; not replacing it"
        ) from None
    except (ConnectionRefusedError, FileNotFoundError):
        unknown = None  # a stale file left by a daemon that died
    except OSError as exc:
        # Its mode keeps mcpd from connecting (EACCES): whether anything listens is unknown.
        unknown = exc
    finally:
        probe.close()
    foreign = _not_ours(path, st)
    if foreign is not None:
        raise UnusableSocketFile(_foreign_socket(path, st, foreign, unknown))
    if unknown is not None:
        raise UnusableSocketFile(
            f"cannot tell whether something listens on {path} (connecting: "
            f"{unknown.strerror or unknown}, mode {stat.S_IMODE(st.st_mode):04o}); "
            "not replacing it"
        )
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    except OSError as exc:
        raise UnusableSocketFile(f"cannot remove the stale socket {path}: {exc.strerror}") from None


_KINDS = {
    stat.S_IFREG: "a regular file",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def describe(st: os.stat_result) -> str:
    """What a file is, whose, and its mode, as a refusal names it."""
    kind = _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
    owner = f"uid {st.st_uid} ({user_name(st.st_uid)})"
    return f"{kind} of {owner}, mode {stat.S_IMODE(st.st_mode):04o}"


def _foreign_socket(path: str, st: os.stat_result, owner: str, unknown: OSError | None) -> str:
    """Why another user's socket file at ``path`` keeps mcpd from listening there."""
    state = "no one listens on it" if unknown is None else "mcpd may not connect to it"
    directory = os.path.dirname(path) or "."
    try:
        sticky = bool(os.stat(directory).st_mode & stat.S_ISVTX)
    except OSError:
        sticky = False
    where = (
        f"in the sticky directory {directory} only its owner or root may remove it"
        if sticky
        else "its owner may have put it there for a program of theirs"
    )
    return (
        f"the socket file {owner} ({state}, mode {stat.S_IMODE(st.st_mode):04o}): mcpd "
        f"does not remove another user's file ({where}); have its owner or root remove "
        "it, or choose another socket path"
    )
