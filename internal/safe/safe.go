package safe

import (
	"context"
	"errors"
	"reflect"
)

// IsNil reports whether v is nil, or an interface holding a nil pointer,
// map, slice, func or channel: a value a method call would panic on.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// JoinCtx returns err joined with ctx's error when ctx has ended and err
// does not match it already, so that both match errors.Is; err otherwise
// (nil stays nil only while ctx is live: JoinCtx is for errors).
func JoinCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}
