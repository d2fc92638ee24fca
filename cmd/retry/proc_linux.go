package main

import "syscall"

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, <linux/prctl.h>

// becomeSubreaper makes retry the reaper of the orphaned descendants of its
// commands (a shell killed on a timeout leaves its children to their
// grandparent, not to init), so that retry can reap them and tell when an
// attempt's process group is gone, even where init does not reap orphans.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
