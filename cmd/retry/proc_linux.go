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

// sigRTMin and sigRTMax are the real-time signals as C programs and kill -l
// number them (glibc keeps 32 and 33 for itself).
const sigRTMin, sigRTMax = 34, 64

// signalAliases are the other names Linux's signals have.
var signalAliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT, "CLD": syscall.SIGCHLD, "POLL": syscall.SIGIO}
