package enum_test

import (
	"fmt"

	"github.com/backoffkit/retry/internal/enum"
)

type Mode uint8

var modeNames = [...]string{"local", "open", "closed"}

func (m Mode) String() string { return enum.Name(m, "Mode", modeNames[:]...) }

func ExampleName() {
	fmt.Println(Mode(1), Mode(7))
	// Output: open Mode(7)
}
