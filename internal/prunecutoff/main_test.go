package prunecutoff_test

import (
	"testing"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

var shared pgtest.Shared

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }
