//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proc

import (
	"errors"
)

// Watchdog: none here (no process groups): if retry is killed, the command
// runs on.
type Watchdog struct{}

func StartWatchdog() *Watchdog { return nil }
func (*Watchdog) Watch(int)    {}
func (*Watchdog) Forget()      {}
func (*Watchdog) Close()       {}
func IsWatchdog() bool         { return false }
func WatchdogMain() int        { return 0 }

func IsGroupHolder() bool  { return false }
func GroupHolderMain() int { return 0 }

type GroupHolder struct{}

func NewGroupHolder() (*GroupHolder, error) { return nil, errors.New("no process groups here") }
func (*GroupHolder) Pgid() int              { return 0 }
func (*GroupHolder) Release()               {}
