//go:build !linux

package main

// becomeSubreaper does nothing here: orphans go to init, which reaps them.
func becomeSubreaper() bool { return false }

func watchChildren(*children) (stop func()) { return func() {} }

func reapZombies(func(pid int) bool) {}
