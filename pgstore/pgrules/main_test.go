package pgrules_test

import (
	"os"
	"testing"

	"github.com/faucetgo/faucet/pgstore/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}
