package e2e

import (
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
