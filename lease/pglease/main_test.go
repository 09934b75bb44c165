package pglease_test

import (
	"testing"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

// These tests run against the real PostgreSQL at DATABASE_URL (see
// internal/pgtest), each in a schema of its own, dropped afterwards. An
// unreachable database fails them unless HOLDFAST_SKIP_INTEGRATION=1.
var shared = pgtest.Shared{MaxConns: 32}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }
