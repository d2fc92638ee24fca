package proc

import (
	"syscall"
)

const ioctlGetTermios = syscall.TCGETS
