// Package curl is what retry http takes from curl: its exit codes, how it
// reads a URL and -d/-F arguments, its output (-o, -D, -i, -v), -w's
// variables, the hops of a redirect chain, and what is secret in a request
// (headers and query values never printed). It knows nothing of retry's
// flags or of process control.
package curl
