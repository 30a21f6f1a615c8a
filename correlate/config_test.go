package correlate

import (
	"errors"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// TestConfigValidate checks the bounds of max_in_flight and that errors
// name the YAML field.
func TestConfigValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for n, ok := range map[int]bool{-1: false, 0: false, 1: true, 1 << 20: true, 1<<20 + 1: false} {
		err := Config{MaxInFlight: n}.Validate()
		if ok != (err == nil) {
			t.Errorf("MaxInFlight %d: %v", n, err)
		}
		var fe *fielderr.Error
		if err != nil && (!errors.As(err, &fe) || fe.Field != "max_in_flight") {
			t.Errorf("MaxInFlight %d: %v does not name the field", n, err)
		}
	}
}
