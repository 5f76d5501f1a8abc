#!/usr/bin/python3
"""A slow disk for the tests: a FUSE filesystem that mirrors BACKING at MOUNTPOINT and takes
DELAY seconds over every lookup, create and removal of a name that begins with "slow". It
stands in for a disk or mount that hangs under the CO's directory (tests/gateway_disk.rs).

Usage: slowfs.py BACKING MOUNTPOINT DELAY  (Debian's python3-fusepy; runs in the foreground)
"""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class Slow(Operations):
    def __init__(self, backing, delay):
        self.backing = backing
        self.delay = delay

    def _path(self, path):
        if os.path.basename(path).startswith("slow"):
            time.sleep(self.delay)
        return os.path.join(self.backing, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                "st_atime", "st_mtime", "st_ctime")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)

    def rmdir(self, path):
        os.rmdir(self._path(path))

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def open(self, path, flags):
        return os.open(self._path(path), flags)

    def release(self, path, fh):
        os.close(fh)

    def symlink(self, target, source):
        os.symlink(source, self._path(target))

    def readlink(self, path):
        return os.readlink(self._path(path))

    def unlink(self, path):
        os.unlink(self._path(path))


if __name__ == "__main__":
    backing, mountpoint, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    FUSE(Slow(backing, delay), mountpoint, foreground=True, nothreads=False)
