package pgaudit_test

import (
	"os"
	"strings"
	"testing"

	"github.com/faucetgo/faucet/pgstore/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
