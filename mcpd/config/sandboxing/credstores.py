"""The user's credential stores: what a server's sandbox hides at every level.

This is the one list; the documentation's table is checked against it. Paths are
relative to the home of the user mcpd runs as (and to ``$HOME``, when that is another
directory), or to the user's runtime directory (``/run/user/UID``, and
``$XDG_RUNTIME_DIR`` when that is another), or absolute (``ON_HOST``). A ``*`` in a path's
last part matches, as each server starts, what the user mcpd runs as owns there
(``transports.stdio.sandbox.anchors``): where an agent makes a socket of its own each time it
runs. A path is hidden when it exists as the server starts; a file is read as empty, a
directory as an empty one, both read-only. A server that needs one of them gets it
back by a grant (``read = ["~/.aws"]``).
"""

from __future__ import annotations

from typing import Final

# Keys, tokens and logins, under the home directory.
IN_HOME: Final = (
    # SSH and GnuPG keys
    ".ssh",
    ".gnupg",
    # cloud and cluster credentials
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".oci",
    ".docker/config.json",
    ".config/containers/auth.json",  # podman's, buildah's and skopeo's registry logins
    ".docker/desktop",  # Docker Desktop's engine socket
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    # logins to hosts, forges and package registries
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings-security.xml",
    # logins to databases and storage
    ".pgpass",
    ".config/rclone/rclone.conf",
    # other AI tools' logins
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".config/gemini",
    # keyrings and password managers
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".password-store",
    ".config/op",
    ".config/1Password",
    ".config/Bitwarden",
    ".1password",  # 1Password's SSH agent
    ".bitwarden-ssh-agent.sock",
    ".var/app/com.bitwarden.desktop",
    ".pki",
    # browser profiles (cookies, saved passwords)
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    "snap/firefox",
    "snap/chromium",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
)

# Agents and buses that hand out keys or secrets, and the sockets of the user's session
# through which a process could act as the user outside its sandbox (start a command
# under the user's service manager or in a container, type into a window or a
# terminal, run one in an editor, read the screen through the accessibility bus),
# under $XDG_RUNTIME_DIR.
IN_RUNTIME_DIR: Final = (
    "keyring",
    "gnupg",
    "gcr",
    "p11-kit",  # p11-kit's server, which forwards PKCS#11 tokens and their keys
    "ssh-agent.socket",
    "openssh_agent",
    "yubikey-agent",
    "org.keepassxc.KeePassXC.BrowserServer",
    "app/org.keepassxc.KeePassXC",
    "bus",
    "systemd",
    "wayland-0",
    "wayland-1",
    "pipewire-0",
    "pipewire-0-manager",
    "pulse",
    "tmux-{uid}",
    "screen",
    "at-spi",
    # editors and terminals that take commands on a socket
    "nvim.*",
    "emacs",
    "vscode-ipc-*.sock",
    "vscode-git-*.sock",
    "wezterm",
    # rootless container engines and the user's own virtual machines
    "docker.sock",
    "dockerd-rootless",
    "podman",
    "containers/auth.json",  # where `podman login` keeps the registry logins
    "containerd",
    "containerd-rootless",
    "buildkit",
    "libvirt",
)

# The machine's container and virtual machine managers: whoever may connect to one (a
# member of the docker group, of lxd, of libvirt) has it run what they like as root.
ON_HOST: Final = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/containerd",
    "/run/buildkit",
    "/var/snap/lxd/common/lxd/unix.socket",
    "/var/lib/lxd/unix.socket",
    "/var/lib/incus/unix.socket",
    "/run/libvirt",
    # journald's sockets (/dev/log links into it; a sandbox's /dev has none): a server
    # runs in mcpd's unit, so what it sent there would be stored as the unit's own,
    # mcpd's fields and all. Its stderr reaches the journal through mcpd, under its name.
    "/run/systemd/journal",
)

# The same in /tmp, which the default level shares: the X display's sockets, the key
# agents' (ssh-agent's, and the agents a login forwards, each in a directory of its
# own), and those of the multiplexers and editors that keep theirs here without
# $XDG_RUNTIME_DIR.
IN_TMP: Final = (
    ".X11-unix",
    "ssh-*",
    "gpg-*",
    "dbus-*",  # a session bus started without $XDG_RUNTIME_DIR (dbus-launch)
    "tmux-{uid}",
    "screens/S-{user}",
    "nvim*",
    "emacs{uid}",
    "vscode-ipc-*.sock",
    "vscode-git-*.sock",
)

# Variables of mcpd's own environment that name a credential store elsewhere.
NAMED_BY: Final = (
    "SSH_AUTH_SOCK",
    "GNUPGHOME",
    "AWS_SHARED_CREDENTIALS_FILE",
    "KUBECONFIG",
    "REGISTRY_AUTH_FILE",
    "PGPASSFILE",
    "RCLONE_CONFIG",
)
# Those that name a directory holding one, with its name there.
IN_DIR_NAMED_BY: Final = (("DOCKER_CONFIG", "config.json"),)
# Those that give a bus's D-Bus address (``unix:path=/tmp/dbus-...``): the session's,
# through which a process could have the user's service manager run what it likes.
BUS_NAMED_BY: Final = ("DBUS_SESSION_BUS_ADDRESS",)
