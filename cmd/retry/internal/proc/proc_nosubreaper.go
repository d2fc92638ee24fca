//go:build !linux

package proc

// BecomeSubreaper does nothing here: orphans go to init, which reaps them.
func BecomeSubreaper() bool { return false }

func WatchChildren(*Children) (stop func()) { return func() {} }

func reapZombies(func(pid int) bool) {}
