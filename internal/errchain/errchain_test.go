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
func (n named) name() string  { return string(n) }

// label is a named error that wraps another.
type label struct {
	named
	next error
}

func (l label) Unwrap() error { return l.next }

// nameOf returns the name of a named error or label, else "".
func nameOf(e error) string {
	if n, ok := e.(interface{ name() string }); ok {
		return n.name()
	}
	return ""
}

// ptrErr is a pointer error whose methods panic on a nil receiver.
type ptrErr struct{ next error }

func (p *ptrErr) Error() string { return "ptr: " + p.next.Error() }
func (p *ptrErr) Unwrap() error { return p.next }

// uncomparable is an error of a type == panics on.
type uncomparable struct{ list []string }

func (u uncomparable) Error() string { return strings.Join(u.list, ",") }

// panics stands for a walk that panics: Find calls the Unwrap method of a
// nil pointer, whose dereference panics.
const panics = "PANIC"

func TestFind(t *testing.T) {
	var nilPtr *ptrErr
	tests := []struct {
		name            string
		err             error
		find, beforeNil string // what Find and FindBeforeNil return
	}{
		{"nil", nil, "", ""},
		{"no match", io.EOF, "", ""},
		{"itself", named("a"), "a", "a"},
		{"under %w", fmt.Errorf("x: %w", fmt.Errorf("y: %w", named("a"))), "a", "a"},
		{"outermost first", fmt.Errorf("x: %w", label{"outer", named("inner")}), "outer", "outer"},
		{"through a match's own chain", label{"", fmt.Errorf("x: %w", named("inner"))}, "inner", "inner"},
		{"depth first: the first branch's depth before the second branch",
			errors.Join(fmt.Errorf("x: %w", named("deep-first")), named("second")), "deep-first", "deep-first"},
		{"second branch", errors.Join(io.EOF, named("second")), "second", "second"},
		{"two %w", fmt.Errorf("%w %w", io.EOF, named("b")), "b", "b"},
		{"a join ends the walk when no branch matches", errors.Join(io.EOF, io.ErrUnexpectedEOF), "", ""},
		{"through a pointer wrapper", &ptrErr{named("p")}, "p", "p"},
		{"Unwrap returns nil", &ptrErr{}, "", ""},
		{"a nil pointer itself", error(nilPtr), panics, ""},
		{"a nil pointer under %w", fmt.Errorf("x: %w", error(nilPtr)), panics, ""},
		{"a match before the nil pointer", &ptrErr{fmt.Errorf("%w", named("before"))}, "before", "before"},
		{"a nil pointer in one branch, the match in the next",
			errors.Join(fmt.Errorf("x: %w", error(nilPtr)), named("next")), panics, "next"},
		{"a nil pointer under a non-nil one", &ptrErr{error(nilPtr)}, panics, ""},
	}
	for _, tt := range tests {
		for _, w := range []struct {
			fn   string
			find func(error, func(error) string) string
			want string
		}{{"Find", Find[string], tt.find}, {"FindBeforeNil", FindBeforeNil[string], tt.beforeNil}} {
			got := findRecover(tt.err, nameOf, w.find)
			if got != w.want {
				t.Errorf("%s: %s = %q, want %q", tt.name, w.fn, got, w.want)
			}
		}
	}
	// FindBeforeNil never calls f with a nil pointer.
	FindBeforeNil(errors.Join(error(nilPtr), &ptrErr{error(nilPtr)}), func(e error) bool {
		if p, ok := e.(*ptrErr); ok && p == nil {
			t.Error("f called with a nil *ptrErr")
		}
		return false
	})
}

// findRecover returns find's result, or panics if it panicked.
func findRecover(err error, f func(error) string, find func(error, func(error) string) string) (s string) {
	defer func() {
		if recover() != nil {
			s = panics
		}
	}()
	return find(err, f)
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
