package main

import (
	"errors"
	"fmt"
)

// Exit codes, documented in the help text (exitCodesHelp).
const (
	exitOK       = 0 // success
	exitError    = 1 // any other error (connection, server, timeout)
	exitUsage    = 2 // bad flags or arguments; a 400 from the admin API
	exitNotFound = 3 // unknown job, slot, lease or fence
	exitRefused  = 4 // refused: 401/403 from the admin API, 409 (slot running)
)

const exitCodesHelp = `Exit codes:
  0  ok
  1  error (connection, server, timeout)
  2  usage: bad flags or arguments (also a 400 from the admin API)
  3  not found: unknown job, slot or partition; lease or fence never written
  4  refused or forbidden: 401/403 from the admin API, 409 (the slot is running)
`

// codedError is an error with the exit code it ends the command with.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &codedError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &codedError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

func refusedf(format string, args ...any) error {
	return &codedError{code: exitRefused, err: fmt.Errorf(format, args...)}
}

// codeOf returns the exit code of err: codedError's, else exitError (1).
func codeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}
