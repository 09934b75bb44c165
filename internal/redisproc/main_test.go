package redisproc_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/redisproc"
)

// envClaim makes the test binary a child that tries to claim the port it
// names, prints what it found and exits (TestPortClaimsHoldAcrossProcesses).
const envClaim = "REDISPROC_TEST_CLAIM_PORT"

func TestMain(m *testing.M) {
	if v := os.Getenv(envClaim); v != "" {
		os.Exit(claimChild(v))
	}
	goleak.VerifyTestMain(m)
}

func claimChild(v string) int {
	port, err := strconv.Atoi(v)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	ok, release, err := redisproc.ClaimPort(port)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer release()
	if ok {
		fmt.Print("claimed")
	} else {
		fmt.Print("held")
	}
	return 0
}
