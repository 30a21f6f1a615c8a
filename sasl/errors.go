package sasl

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AuthError is the broker refusing an authentication step: its error code
// and, where it sent one, its message. It never holds a secret.
type AuthError struct {
	// Code is the Kafka error code (58 SASL_AUTHENTICATION_FAILED, 33
	// UNSUPPORTED_SASL_MECHANISM, 34 ILLEGAL_SASL_STATE, ...).
	Code int16
	// Name is the code's name, e.g. SASL_AUTHENTICATION_FAILED.
	Name string
	// Message is the broker's error message, or for a SaslHandshake
	// refusal the mechanisms the broker offers.
	Message string
}

func (e *AuthError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("broker refused: %s (%d)", e.Name, e.Code)
	}
	return fmt.Sprintf("broker refused: %s (%d): %s", e.Name, e.Code, e.Message)
}

func authError(code int16, msg string) *AuthError {
	name := fmt.Sprintf("UNKNOWN_ERROR_CODE_%d", code)
	if ke := kerr.TypedErrorForCode(code); ke != nil && ke.Code == code {
		name = ke.Message
		if msg == "" {
			msg = ke.Description
		}
	}
	return &AuthError{Code: code, Name: name, Message: msg}
}

// redactedText stands where a secret was found in an error.
const redactedText = "[redacted]"

// redacted returns err unchanged unless its text carries one of secrets
// (a broker or mechanism echoing what it was sent); then an error with the
// same text, secrets replaced. An *AuthError keeps its type.
func redacted(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	hit := false
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			hit = true
		}
	}
	if !hit {
		return err
	}
	scrub := func(t string) string {
		for _, s := range secrets {
			if s != "" {
				t = strings.ReplaceAll(t, s, redactedText)
			}
		}
		return t
	}
	if ae, ok := err.(*AuthError); ok {
		return &AuthError{Code: ae.Code, Name: ae.Name, Message: scrub(ae.Message)}
	}
	return redactedError(scrub(text))
}

type redactedError string

func (e redactedError) Error() string { return string(e) }
