//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package proc

import (
	"syscall"
)

const ioctlGetTermios = syscall.TIOCGETA
