//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "errors"

// watchdog: none here (no process groups): if retry is killed, the command
// runs on.
type watchdog struct{}

func startWatchdog() *watchdog { return nil }
func (*watchdog) watch(int)    {}
func (*watchdog) forget()      {}
func (*watchdog) close()       {}
func isWatchdog() bool         { return false }
func watchdogMain() int        { return 0 }

func isGroupHolder() bool  { return false }
func groupHolderMain() int { return 0 }

type groupHolder struct{}

func newGroupHolder() (*groupHolder, error) { return nil, errors.New("no process groups here") }
func (*groupHolder) pgid() int              { return 0 }
func (*groupHolder) release()               {}
