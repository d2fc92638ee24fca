package errchain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// named is an error with a name, found by the tests' f.
type named string

func (n named) Error() string { return string(n) }

// nameOf returns the name of a named error, else "".
func nameOf(e error) string {
	n, _ := e.(named)
	return string(n)
}

// ptrErr is a pointer error whose methods panic on a nil receiver.
type ptrErr struct{ next error }

func (p *ptrErr) Error() string { return "ptr: " + p.next.Error() }
func (p *ptrErr) Unwrap() error { return p.next }

// uncomparable is an error of a type == panics on.
type uncomparable struct{ list []string }

func (u uncomparable) Error() string { return strings.Join(u.list, ",") }

func TestFind(t *testing.T) {
	var nilPtr *ptrErr
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"no match", io.EOF, ""},
		{"itself", named("a"), "a"},
		{"under %w", fmt.Errorf("x: %w", fmt.Errorf("y: %w", named("a"))), "a"},
		{"outermost first", fmt.Errorf("x: %w", named("outer")), "outer"},
		{"depth first: the first branch's depth before the second branch",
			errors.Join(fmt.Errorf("x: %w", named("deep-first")), named("second")), "deep-first"},
		{"second branch", errors.Join(io.EOF, named("second")), "second"},
		{"nil entries in a join skipped", fmt.Errorf("%w %w", io.EOF, named("b")), "b"},
		{"a join ends the walk when no branch matches", errors.Join(io.EOF, io.ErrUnexpectedEOF), ""},
		{"through a pointer wrapper", &ptrErr{named("p")}, "p"},
		{"Unwrap returns nil", &ptrErr{}, ""},
		{"Find does not check for nil pointers: a nil pointer's Unwrap panics", fmt.Errorf("x: %w", error(nilPtr)), "PANIC"},
	}
	for _, tt := range tests {
		got, panicked := findRecover(tt.err, nameOf, Find[string])
		if tt.want == "PANIC" {
			if !panicked {
				t.Errorf("%s: Find = %q, want the panic of the nil pointer's Unwrap (Find does not check)", tt.name, got)
			}
			continue
		}
		if panicked || got != tt.want {
			t.Errorf("%s: Find = %q (panicked %v), want %q", tt.name, got, panicked, tt.want)
		}
	}
}

func findRecover(err error, f func(error) string, find func(error, func(error) string) string) (s string, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return find(err, f), false
}

func TestFindBeforeNil(t *testing.T) {
	var nilPtr *ptrErr
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"itself", named("a"), "a"},
		{"under %w", fmt.Errorf("x: %w", named("a")), "a"},
		{"a nil pointer itself", error(nilPtr), ""},
		{"a nil pointer ends its branch", fmt.Errorf("x: %w", error(nilPtr)), ""},
		{"a match before the nil pointer", &ptrErr{fmt.Errorf("%w", named("before"))}, "before"},
		{"a nil pointer in one branch, the match in the next",
			errors.Join(fmt.Errorf("x: %w", error(nilPtr)), named("next")), "next"},
		{"a nil pointer under a non-nil one", &ptrErr{error(nilPtr)}, ""},
	}
	for _, tt := range tests {
		got, panicked := findRecover(tt.err, nameOf, FindBeforeNil[string])
		if panicked || got != tt.want {
			t.Errorf("%s: FindBeforeNil = %q (panicked %v), want %q", tt.name, got, panicked, tt.want)
		}
	}
	// f is never called with a nil pointer.
	FindBeforeNil(errors.Join(error(nilPtr), &ptrErr{error(nilPtr)}), func(e error) bool {
		if p, ok := e.(*ptrErr); ok && p == nil {
			t.Error("f called with a nil *ptrErr")
		}
		return false
	})
}

// Results of an interface type are compared with nil only: an
// uncomparable dynamic type does not panic.
func TestFindInterfaceResult(t *testing.T) {
	u := uncomparable{[]string{"a", "b"}}
	got := Find(fmt.Errorf("x: %w", u), func(e error) error {
		if _, ok := e.(uncomparable); ok {
			return e
		}
		return nil
	})
	if got == nil || got.Error() != "a,b" {
		t.Fatalf("Find = %v, want the uncomparable error", got)
	}
	// f is never called with nil.
	Find(fmt.Errorf("%w", errors.Join(nil, io.EOF)), func(e error) bool {
		if e == nil {
			t.Error("f called with nil")
		}
		return false
	})
}

func TestFindDoesNotAllocate(t *testing.T) {
	deep := error(named("a"))
	for range 8 {
		deep = fmt.Errorf("w: %w", deep)
	}
	joined := errors.Join(io.EOF, fmt.Errorf("w: %w", context.DeadlineExceeded))
	for _, tt := range []struct {
		name string
		run  func()
	}{
		{"Find string", func() { Find(deep, nameOf) }},
		{"Find bool, join", func() { Find(joined, func(e error) bool { return e == context.DeadlineExceeded }) }},
		{"Find interface", func() {
			Find(deep, func(e error) interface{ Timeout() bool } { t, _ := e.(interface{ Timeout() bool }); return t })
		}},
		{"FindBeforeNil", func() { FindBeforeNil(deep, nameOf) }},
	} {
		if n := testing.AllocsPerRun(100, tt.run); n != 0 {
			t.Errorf("%s: %v allocations per walk, want 0", tt.name, n)
		}
	}
}

func BenchmarkFind(b *testing.B) {
	deep := error(named("a"))
	for range 8 {
		deep = fmt.Errorf("w: %w", deep)
	}
	b.Run("Find", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Find(deep, nameOf)
		}
	})
	b.Run("FindBeforeNil", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			FindBeforeNil(deep, nameOf)
		}
	})
}
