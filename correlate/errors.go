package correlate

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by a table that has been closed.
var ErrClosed = errors.New("in-flight table closed")

// ErrBusy is WaitEmpty's timeout: requests are still in flight.
var ErrBusy = errors.New("requests still in flight")

// ErrUnexpectedResponse is a response that arrived with nothing in flight.
var ErrUnexpectedResponse = errors.New("response with no request in flight")

// MismatchError is a response whose correlation id is not the head's.
type MismatchError struct {
	Want int32 // upstream id at the head of the table
	Got  int32 // id the upstream sent
	// ClientID is the client's id of the head entry, for the log line.
	ClientID int32
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("response correlation id %d does not match the oldest in-flight request (upstream id %d, client id %d)", e.Got, e.Want, e.ClientID)
}

// ErrDraining is returned by Push once Drain was called: the request was
// not recorded, so it must not be sent.
var ErrDraining = errors.New("in-flight table draining")

// ErrAwaitingAnswer is returned by WaitAnswered when its time is up and
// the answer a held frame waits for has not come.
var ErrAwaitingAnswer = errors.New("awaiting the answer to a SASL handshake or token")
