package redislease

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotReplicated matches every *NotReplicatedError.
var ErrNotReplicated = errors.New("lease: acquire not acknowledged by enough replicas")

// NotReplicatedError reports an acquire that fewer replicas than
// Options.ReplicaAck.Replicas acknowledged in time. The lease was released.
type NotReplicatedError struct {
	Name      string
	Want, Got int
}

// Error implements error.
func (e *NotReplicatedError) Error() string {
	// The Client wraps it as `lease "<name>": acquire: ...`.
	return fmt.Sprintf("acknowledged by %d replicas, want %d", e.Got, e.Want)
}

// Is makes errors.Is(err, ErrNotReplicated) true.
func (e *NotReplicatedError) Is(target error) bool { return target == ErrNotReplicated }

// ReplicaAck configures Options.ReplicaAck (Options.ReplicaAck).
type ReplicaAck struct {
	// Replicas is how many replicas must acknowledge; 0 disables.
	Replicas int
	// Timeout bounds the wait. Default 100 ms.
	Timeout time.Duration
}
