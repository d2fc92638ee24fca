package otelretry

import (
	"context"
	"go/token"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/errchain"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ErrorType returns the value this package records as error.type for err,
// following the OpenTelemetry semantic conventions: a low-cardinality name of
// what went wrong, never the name of a wrapper type. The first that applies:
//
//   - the result of an ErrorType() string method in err's chain, if not
//     empty (the convention of go.opentelemetry.io/otel/semconv);
//   - an HTTP status code, as a string ("503"): the Status of an
//     [*httpretry.AttemptError], or a positive HTTPCode() int (as the
//     *apierror.APIError of github.com/googleapis/gax-go has);
//   - a gRPC status code, by its canonical name ("UNAVAILABLE",
//     "RESOURCE_EXHAUSTED"), from a GRPCStatus() method in the chain (gRPC
//     status errors, and errors that wrap one);
//   - the Class of an [*httpretry.AttemptError] without a status ("reset",
//     "timeout", "refused", ...);
//   - "timeout" for a timeout (context.DeadlineExceeded, or a net.Error
//     whose Timeout() is true), "canceled" for context.Canceled;
//   - otherwise the type of the first error in the chain that is not a
//     wrapper of the retry modules (the hint and permanence marks of
//     [retry.After] and [retry.Permanent], for instance), of fmt.Errorf,
//     nor a *url.Error, named as semconv.ErrorType names it ("*net.OpError"), or "_OTHER" for
//     a nil err.
func ErrorType(err error) string {
	if err == nil {
		return semconv.ErrorTypeOther.Value.AsString()
	}
	// Each search of the chain ends at a nil pointer in it
	// (FindBeforeNil): its methods would likely panic, and an observer
	// must not.
	if s := errchain.FindBeforeNil(err, func(e error) string {
		if et, ok := e.(interface{ ErrorType() string }); ok {
			return et.ErrorType()
		}
		return ""
	}); s != "" {
		return s
	}
	if s := errchain.FindBeforeNil(err, httpStatus); s != "" {
		return s
	}
	if s := errchain.FindBeforeNil(err, grpcCode); s != "" {
		return s
	}
	if s := errchain.FindBeforeNil(err, attemptClass); s != "" {
		return s
	}
	if s := errchain.FindBeforeNil(err, contextErr); s != "" {
		return s
	}
	if s := errchain.FindBeforeNil(err, timeout); s != "" {
		return s
	}
	return typeName(unwrapOurs(err))
}

// contextErr returns "timeout" for context.DeadlineExceeded, "canceled" for
// context.Canceled, else "".
func contextErr(e error) string {
	// No panic: == panics only for two values of one uncomparable type, and
	// the sentinels' types are comparable.
	switch e {
	case context.DeadlineExceeded:
		return "timeout"
	case context.Canceled:
		return "canceled"
	}
	return ""
}

// typeName names err's type as semconv.ErrorType does ("*net.OpError",
// "github.com/x/y.MyError"), without its search of the chain for an
// ErrorType method (done already, and unsafe with a nil pointer in the
// chain).
func typeName(err error) string {
	t := reflect.TypeOf(err)
	if pkg, name := t.PkgPath(), t.Name(); pkg != "" && name != "" {
		return pkg + "." + name
	}
	return t.String()
}

// attemptClass returns the Class of an *httpretry.AttemptError, or "".
func attemptClass(e error) string {
	if ae, ok := e.(*httpretry.AttemptError); ok {
		return ae.Class
	}
	return ""
}

// timeout returns "timeout" for a net.Error whose Timeout() is true.
func timeout(e error) string {
	if ne, ok := e.(net.Error); ok && ne.Timeout() {
		return "timeout"
	}
	return ""
}

// httpStatus returns e's HTTP status code as a string, or "".
func httpStatus(e error) string {
	if ae, ok := e.(*httpretry.AttemptError); ok && ae.Status > 0 {
		return strconv.Itoa(ae.Status)
	}
	if h, ok := e.(interface{ HTTPCode() int }); ok {
		if c := h.HTTPCode(); c > 0 {
			return strconv.Itoa(c)
		}
	}
	return ""
}

// grpcCodeNames are the gRPC status codes' canonical names, by number, as
// rpc.response.status_code spells them.
var grpcCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// grpcCode returns the canonical name of the gRPC status code of e, found
// as grpc-go's status.FromError finds it (a GRPCStatus() method whose result
// has a Code() method returning an integer), or "". The methods are found by
// reflection, once per type, so that this module does not depend on grpc-go;
// a method that panics counts as none.
func grpcCode(e error) (name string) {
	v := reflect.ValueOf(e)
	i := methodIndex(&grpcStatusMethods, v.Type(), "GRPCStatus")
	if i < 0 {
		return ""
	}
	defer func() {
		if recover() != nil {
			name = ""
		}
	}()
	st := v.Method(i).Call(nil)[0]
	if k := st.Kind(); (k == reflect.Pointer || k == reflect.Interface) && st.IsNil() {
		return ""
	}
	j := methodIndex(&codeMethods, st.Type(), "Code")
	if j < 0 {
		return ""
	}
	code := st.Method(j).Call(nil)[0]
	switch code.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n := code.Uint(); n < uint64(len(grpcCodeNames)) {
			return grpcCodeNames[n]
		}
		return strconv.FormatUint(code.Uint(), 10)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := code.Int(); n >= 0 && n < int64(len(grpcCodeNames)) {
			return grpcCodeNames[n]
		}
		return strconv.FormatInt(code.Int(), 10)
	}
	return ""
}

// Caches of methodIndex, by method name: reflect.Type -> int.
var grpcStatusMethods, codeMethods sync.Map

// methodIndex returns the index of t's method name if it takes no argument
// and returns one value, else -1; cache holds the answers for name.
func methodIndex(cache *sync.Map, t reflect.Type, name string) int {
	if i, ok := cache.Load(t); ok {
		return i.(int)
	}
	i := -1
	if m, ok := t.MethodByName(name); ok && m.Type.NumIn() == 1 && m.Type.NumOut() == 1 { // NumIn counts the receiver
		i = m.Index
	}
	cache.Store(t, i)
	return i
}

// ourModule is the path prefix of the retry modules' packages.
const ourModule = "github.com/backoffkit/retry"

// unwrapOurs skips the wrappers at the head of err's chain that the retry
// modules (such as the marks of retry.After and retry.Permanent),
// fmt.Errorf's %w and net/http's *url.Error add: their names say nothing
// about the failure.
func unwrapOurs(err error) error {
	for {
		if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer && v.IsNil() {
			return err
		}
		if ue, ok := err.(*url.Error); ok && ue.Err != nil {
			err = ue.Err // "Get URL: ...": the failure is inside
			continue
		}
		t := reflect.TypeOf(err)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		pkg := t.PkgPath()
		if token.IsExported(t.Name()) || (pkg != "fmt" && pkg != ourModule && !strings.HasPrefix(pkg, ourModule+"/")) {
			return err
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		next := u.Unwrap()
		if next == nil {
			return err
		}
		err = next
	}
}
