package chaos

import (
	"os"
	"testing"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

// TestMain runs a worker instead of the tests when the test binary was
// re-executed as one (see worker_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(envWorker); mode != "" {
		os.Exit(runWorker(mode))
	}
	pgtest.Main(m, &shared)
}
