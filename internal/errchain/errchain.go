// Package errchain walks an error's chain as errors.Is and errors.As do:
// depth first, through both Unwrap() error and Unwrap() []error, in the
// order they visit it. The walk allocates nothing, so that the retry loop
// can classify every failed attempt for free; the test of each error is the
// caller's, and the first result that is not the zero value ends the walk.
//
// It is the one walker of the repository: the core (IsPermanent,
// RetryAfter, Error.Timeout), gaxretry (a context's own deadline) and
// otelretry (error.type) use it.
package errchain

import "reflect"

// Find returns the first result of f, over err and the errors under it in
// the order errors.Is visits them, that is not T's zero value, or the zero
// value if there is none (or err is nil). f is never called with nil.
//
// An interface T is only compared with nil, which never panics, whatever
// the dynamic type of f's result.
func Find[T comparable](err error, f func(error) T) T {
	return find(err, f, false)
}

// FindBeforeNil is [Find] that ends the walk (the branch it is in) at a nil
// pointer held in an error, such as a (*MyError)(nil) that a function
// returned as an error: neither f nor its Unwrap method is called on it, as
// its methods would likely panic. An observer that must never panic uses
// it; the check costs one reflect.ValueOf per error.
func FindBeforeNil[T comparable](err error, f func(error) T) T {
	return find(err, f, true)
}

func find[T comparable](err error, f func(error) T, stopAtNil bool) T {
	var zero T
	for err != nil {
		if stopAtNil && nilPointer(err) {
			return zero
		}
		if v := f(err); v != zero {
			return v
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if v := find(e, f, stopAtNil); v != zero {
					return v
				}
			}
			return zero
		default:
			return zero
		}
	}
	return zero
}

// nilPointer reports whether err holds a nil pointer.
func nilPointer(err error) bool {
	v := reflect.ValueOf(err)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
