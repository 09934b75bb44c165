package main

import (
	"testing"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

// shared is the package's one Postgres pool.
var shared pgtest.Shared

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }
