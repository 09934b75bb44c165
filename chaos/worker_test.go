package chaos

import (
	"fmt"
	"os"
)

// envWorker, set in a re-executed test binary, names the worker it runs.
const envWorker = "HOLDFAST_CHAOS_WORKER"

// workers are the modes a re-executed test binary can run.
var workers = map[string]func() error{}

// runWorker runs the worker mode and returns the exit code.
func runWorker(mode string) int {
	w, ok := workers[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "chaos worker: unknown mode %q\n", mode)
		return 2
	}
	if err := w(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos worker %s: %v\n", mode, err)
		return 1
	}
	return 0
}
