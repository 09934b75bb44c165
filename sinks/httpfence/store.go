package httpfence

import (
	"errors"
	"fmt"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
)

// fenceRefusal reports whether err, from FencedStore.BeginFenced, is the
// fence's refusal of the holder rather than a store failure.
func fenceRefusal(err error) bool {
	var stale *fence.StaleTokenError
	return errors.As(err, &stale) || errors.Is(err, fence.ErrNoToken) || errors.Is(err, idemstore.ErrInvalidFencing)
}

// ErrInvalidOptions is returned by constructors for a configuration they
// cannot use; the message names the field.
var ErrInvalidOptions = fmt.Errorf("httpfence: %w", errfamily.ErrInvalidOptions)
