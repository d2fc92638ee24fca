// Package enum names the values of the repository's small enumerations: a
// uint8 type whose values index a table of names. The tables stay with
// their types; this package holds the one rule for a value without a name,
// "Type(n)" as fmt prints an unknown value, so that a log or an error never
// shows an empty string or a bare number.
//
// A name is parsed back with [slices.Index] on the same table.
package enum

import "strconv"

// Name returns names[v], or typ+"(v)", such as "Shape(9)", when v is past
// the end of names or its name is empty (a value left unnamed, such as a
// zero that means "unset").
func Name[T ~uint8](v T, typ string, names ...string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}
