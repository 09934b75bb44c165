package compat_test

import (
	"testing"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

var shared = pgtest.Shared{MaxConns: 16}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }
