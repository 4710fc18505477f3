"""An export directory written whole, then renamed into place (issue 54).

`export_translator` once wrote into its `path` in place: a process killed
midway (kill -9, a preemption, a full disk) left an older export there with
some of the new files (the new `variables/` under the old `saved_model.pb`),
which no longer loaded. Now `replace_directory` writes the whole export into
a hidden sibling of `path` (same parent, so the same file system), syncs it to
disk, and renames it into place:

    parent/
      .1.tmp-<pid>-<hex>/   the new export, being written (a server never
                            looks here: TF Serving loads numbered directories)
      1/                    the older export, untouched until the new one is
                            complete

- `path` absent: `rename(tmp, path)`, one atomic step.
- `path` an older export (or an empty directory): `rename(path, .1.old-<pid>-<hex>)`,
  `rename(tmp, path)`, then the old one is deleted. Between the two renames
  (two system calls, no writing) `path` does not exist; at any other instant it
  is the complete old export or the complete new one. A process killed exactly
  there leaves the complete old export in `.1.old-...` (rename it back by hand,
  or export again).

A Python exception removes the temporary directory and leaves `path` as it was;
a killed process leaves only the hidden sibling, which the next export to the
same `path` removes (only names of this pattern whose process is no longer
running: two exports to one path from one machine never remove each other's).

What may be replaced is checked before anything is written
(`check_export_directory`): a path that is not a directory, or a non-empty
directory that is not an export, is refused with `FileExistsError`; so is an
export holding files an export does not write (replacing the directory would
delete them).
"""

import collections
import os
import re
import shutil
import stat
import uuid

SAVED_MODEL_FILE = "saved_model.pb"
# What `tf.saved_model.save` and `export_translator` write at the top of an export, and
# `winner.json` (`tf-outheads study --export-winner` writes it beside the SavedModel).
EXPORT_ENTRIES = frozenset({SAVED_MODEL_FILE, "fingerprint.pb", "variables", "assets",
                            "assets.extra", "winner.json"})
# What `export_translator` writes in `assets.extra/`.
EXTRA_ASSETS = frozenset({"tf_outheads_export.json"})


# A kind of export directory: the file that marks one (`marker`), what it may hold at
# its top (`entries`), what it may hold in `assets.extra/` (`extra`), and its name.
ExportKind = collections.namedtuple("ExportKind", "name marker entries extra")
SAVED_MODEL = ExportKind("SavedModel", SAVED_MODEL_FILE, EXPORT_ENTRIES, EXTRA_ASSETS)
# `tf_outheads.export.to_ctranslate2`: CTranslate2's files and the run's tokenizers.
CTRANSLATE2 = ExportKind(
    "CTranslate2 model", "model.bin",
    frozenset({"model.bin", "config.json", "shared_vocabulary.json", "source_vocabulary.json",
               "target_vocabulary.json", "source.spm.model", "target.spm.model",
               "tf_outheads_ctranslate2.json", "winner.json"}),
    frozenset())


def check_export_directory(path, kind=SAVED_MODEL):
    """Refuse `path` unless an export of `kind` may be written there: absent, an empty
    directory, or such an export (its marker file, and only what such an export writes).

    Args:
        path: str or path-like.
        kind: `SAVED_MODEL` (`export_translator`) or `CTRANSLATE2` (`to_ctranslate2`).
            Defaults to `SAVED_MODEL`.

    Raises:
        FileExistsError: naming `path` (and the files in the way): it would not be
            overwritten.
    """
    path = os.fspath(path)
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory: an export would not "
                              "overwrite it. Choose a new or empty directory")
    entries = set(os.listdir(path))
    if not entries:
        return
    if kind.marker not in entries:
        hint = (f" (for TF Serving, a numbered version directory such as "
                f"{os.path.join(path, '1')})" if kind is SAVED_MODEL else "")
        raise FileExistsError(
            f"{path} is not empty and holds no {kind.name} ({kind.marker}; it holds "
            f"{_listing(entries)}): it is not such an export, so an export would not "
            f"overwrite it. Choose a new or empty directory{hint}")
    foreign = sorted(entries - kind.entries)
    extra = os.path.join(path, "assets.extra")
    if "assets.extra" in kind.entries and os.path.isdir(extra):
        foreign += sorted(os.path.join("assets.extra", name)
                          for name in set(os.listdir(extra)) - kind.extra)
    if foreign:
        raise FileExistsError(
            f"{path} holds an export and files an export does not write "
            f"({_listing(foreign)}): an export replaces the whole directory, so it would not "
            "overwrite it. Move those files, or choose a new or empty directory")


def _listing(names, most=5):
    names = sorted(names)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


def _sibling(target, kind):
    """`parent/.name.<kind>-<pid>-<hex>`: hidden, beside `target`, this process's."""
    parent, name = os.path.split(target)
    return os.path.join(parent, f".{name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _process_running(pid):
    if pid == os.getpid():
        return True  # another export of this process (a thread): its own to remove
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's process, running
        return True
    return True


def remove_stale_siblings(target):
    """Delete what killed exports to `target` left beside it (`.name.tmp-<pid>-<hex>`,
    `.name.old-<pid>-<hex>` of processes no longer running); returns their paths.
    Nothing of another name is touched."""
    parent, name = os.path.split(os.path.abspath(target))
    pattern = re.compile(rf"\.{re.escape(name)}\.(?:tmp|old)-(\d+)-[0-9a-f]{{8}}")
    removed = []
    try:
        siblings = os.listdir(parent)
    except FileNotFoundError:
        return removed
    for sibling in siblings:
        match = pattern.fullmatch(sibling)
        if match and not _process_running(int(match.group(1))):
            stale = os.path.join(parent, sibling)
            if os.path.isdir(stale) and not os.path.islink(stale):
                shutil.rmtree(stale, ignore_errors=True)
            else:
                os.remove(stale)
            removed.append(stale)
    return removed


def _fsync(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    except OSError:  # a file system that cannot sync a directory
        pass
    finally:
        os.close(fd)


def _sync_tree(root):
    """Every file and directory under `root` on disk (so that after a power cut the
    renamed directory is not a set of empty files)."""
    for directory, _, files in os.walk(root):
        for name in files:
            _fsync(os.path.join(directory, name))
        _fsync(directory, directory=True)


def replace_directory(path, write, kind=SAVED_MODEL):
    """Call `write(temporary_directory)` (an empty directory beside `path`), then move the
    result to `path` as the module docstring says: `path` is never partly written.

    Args:
        path: str or path-like. The directory to write (created with its parents);
            if it is a symbolic link, the directory it points to is replaced.
        write: callable taking the temporary directory's path (str).
        kind: what `path` may already hold (`check_export_directory`). Defaults to
            `SAVED_MODEL`.

    Returns:
        str, `path`.

    Raises:
        FileExistsError: `path` may not be replaced (`check_export_directory`), before
            anything is written.
    """
    path = os.fspath(path)
    check_export_directory(path, kind)
    target = os.path.realpath(path)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    remove_stale_siblings(target)
    temporary = _sibling(target, "tmp")
    os.mkdir(temporary)  # permissions as `tf.saved_model.save` gives (not mkdtemp's 0700)
    try:
        write(temporary)
        _sync_tree(temporary)
        check_export_directory(path, kind)  # still replaceable (another writer, a user)
        if not os.path.lexists(target):
            os.rename(temporary, target)
        else:
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))  # as it was
            old = _sibling(target, "old")
            os.rename(target, old)
            # `target` does not exist from here to the next rename (two system calls).
            try:
                os.rename(temporary, target)
            except OSError:
                if not os.path.lexists(target):
                    os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)  # what is left is removed next time
        _fsync(parent, directory=True)
    finally:
        if os.path.lexists(temporary):
            shutil.rmtree(temporary, ignore_errors=True)
    return path


__all__ = ["CTRANSLATE2", "SAVED_MODEL", "ExportKind", "check_export_directory", "remove_stale_siblings", "replace_directory"]
