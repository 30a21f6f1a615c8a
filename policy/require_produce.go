// This file holds the conditions on what clients produce: acks, judged
// from the request; idempotent and compression, from each batch's
// header; record_key, max_record_bytes and headers, from the records
// themselves, read through the record path's budgets. Each is refused
// per partition with the code a broker gives: INVALID_REQUIRED_ACKS,
// UNSUPPORTED_COMPRESSION_TYPE, or INVALID_RECORD (with the records named
// in record_errors) for a batch with no producer id and for the record
// conditions.

package policy

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/records"
)

// Inflater reads compressed batches within the record path's budgets
// (tracing.RecordBudget): what a rule may inflate is what tracing may.
type Inflater interface {
	Inflate(dst []byte, codec int, data []byte) ([]byte, error)
	// Cut names the limit that stopped reading, "" for none.
	Cut() string
}

// producerIDOff is where a batch header's producer id is (int64; -1 for
// none).
const producerIDOff = 43

func (ru *rule) requireProduce(r *Request, q *kmsg.ProduceRequest, j *judgement) {
	c := ru.Require
	var in Inflater
	var scratch []byte
	for _, t := range q.Topics {
		j.total += len(t.Partitions)
		name := t.Topic
		if name == "" {
			name = r.Topics.Name(t.TopicID)
		}
		if !ru.judged(name) {
			continue
		}
		for _, p := range t.Partitions {
			// The name is copied only for a refusal: it outlives the frame.
			refusal := func() Refusal {
				return Refusal{Topic: string([]byte(t.Topic)), TopicID: t.TopicID, Partition: p.Partition}
			}
			if !acksMeet(c.requiredAcks(), q.Acks) {
				it := refusal()
				it.Code, it.Condition = codeInvalidRequiredAcks, condAcks
				it.Message = ru.message("acks " + strconv.Itoa(int(q.Acks)) + ", must be " + c.Acks)
				j.refuse(it)
				continue
			}
			if len(p.Records) == 0 {
				continue // nothing produced, nothing to judge
			}
			if cond, text := ru.judgeBatchHeaders(p.Records); text != "" {
				it := refusal()
				it.Code, it.Condition, it.Message = codeInvalidRecord, cond, ru.message(text)
				if cond == condCompression {
					it.Code = codeUnsupportedCodec
				}
				j.refuse(it)
				continue
			}
			if !c.readsRecords() {
				continue
			}
			if in == nil {
				if in = r.Records; in == nil {
					in = &fallbackInflater{bytes: 1 << 20}
				}
			}
			var errs []RecordError
			var cond string
			var broken int
			var transient bool
			scratch, cond, errs, broken, transient = ru.judgeRecords(p.Records, in, scratch)
			if len(errs) > 0 {
				it := refusal()
				it.Code, it.Condition, it.RecordErrors = codeInvalidRecord, cond, errs
				if transient {
					// Not the records' fault: the client retries, as it
					// does a broker's timeout.
					it.Code, it.RecordErrors = codeRequestTimedOut, nil
				}
				it.Message = errs[0].Message
				if broken > 1 {
					it.Message += " (and " + strconv.Itoa(broken-1) + " more records)"
				}
				j.refuse(it)
			}
		}
	}
}

// judgeBatchHeaders judges what batch headers say: the codec and the
// producer id. Data that is not whole magic-2 batches fails both (a
// broker would refuse it too).
func (ru *rule) judgeBatchHeaders(data []byte) (cond, text string) {
	c := ru.Require
	if len(c.Compression) == 0 && !c.Idempotent {
		return "", ""
	}
	used := 0
	records.EachBatch(data, func(b []byte) bool {
		used += len(b)
		if codec := records.CodecOf(b); len(c.Compression) > 0 && !allowedCodec(c.Compression, codec) {
			cond, text = condCompression, "compression "+codecName(codec)+" not one of ["+strings.Join(c.Compression, ", ")+"]"
			return false
		}
		if c.Idempotent && int64(binary.BigEndian.Uint64(b[producerIDOff:])) < 0 {
			cond, text = condIdempotent, "idempotent: a batch has no producer id (enable.idempotence)"
			return false
		}
		return true
	})
	if text == "" && used != len(data) {
		cond = condCompression
		if c.Idempotent {
			cond = condIdempotent
		}
		return cond, "records are not whole magic-2 batches"
	}
	return cond, text
}

// judgeRecords reads each record of a partition's batches and judges the
// record conditions, one record at a time (a batch of a million tiny
// records costs one record's memory). A batch it cannot read (damaged, or
// over the record path's budget) fails them closed: its partition is
// refused, the message saying why; transient is set when only a passing
// limit stopped the read (the decoders busy, the process's rate), which
// the client may retry. It returns scratch for reuse, the condition
// broken first, the record errors kept (at most maxRecordErrors) and how
// many records broke a condition in all.
func (ru *rule) judgeRecords(data []byte, in Inflater, scratch []byte) (out []byte, cond string, errs []RecordError, broken int, transient bool) {
	c := ru.Require
	base := int32(0) // index of the batch's first record in the partition
	add := func(i int32, condition string, text func() string) {
		if cond == "" {
			cond = condition
		}
		broken++
		if len(errs) < maxRecordErrors {
			errs = append(errs, RecordError{Index: i, Message: ru.message(text())})
		}
	}
	records.EachBatch(data, func(b []byte) bool {
		count := int(int32(binary.BigEndian.Uint32(b[records.CountOff:])))
		body := b[records.HeaderSize:]
		if codec := records.CodecOf(b); codec != 0 {
			var err error
			if scratch, err = in.Inflate(scratch[:0], codec, body); err != nil {
				first := c.firstRecordCondition()
				transient = transientCut(in.Cut())
				add(base, first, func() string { return "records not read (" + notRead(in, err) + "), so " + first + " cannot be judged" })
				return false
			}
			body = scratch
		}
		err := records.EachRecord(body, count, func(i int, rec *kmsg.Record) bool {
			at := base + int32(i)
			switch {
			case c.RecordKey && rec.Key == nil:
				add(at, condRecordKey, func() string { return "record_key: record " + strconv.Itoa(int(at)) + " has a null key" })
			case c.MaxRecordBytes > 0 && int(rec.Length) > c.MaxRecordBytes:
				n := rec.Length
				add(at, condMaxRecordBytes, func() string {
					return "max_record_bytes: record " + strconv.Itoa(int(at)) + " is " + strconv.Itoa(int(n)) + " bytes, above max " + strconv.Itoa(c.MaxRecordBytes)
				})
			default:
				if h := missingHeader(rec, c.Headers); h != "" {
					add(at, condHeaders, func() string { return "headers: record " + strconv.Itoa(int(at)) + " lacks header " + h })
				}
			}
			return true
		})
		if err != nil {
			first := c.firstRecordCondition()
			add(base, first, func() string { return "records unreadable (" + err.Error() + "), so " + first + " cannot be judged" })
			return false
		}
		base += int32(count)
		return true
	})
	return scratch, cond, errs, broken, transient
}

// transientCut reports the record path's limits that pass with time:
// every decoder busy, the process's bytes per second spent.
func transientCut(cut string) bool {
	return cut == "decoders_busy" || cut == "max_decompressed_bytes_per_second"
}

// firstRecordCondition names the record condition a batch that could not
// be read fails.
func (q *Require) firstRecordCondition() string {
	switch {
	case q.RecordKey:
		return condRecordKey
	case q.MaxRecordBytes > 0:
		return condMaxRecordBytes
	}
	return condHeaders
}

func missingHeader(rec *kmsg.Record, keys []string) string {
	for _, k := range keys {
		found := false
		for _, h := range rec.Headers {
			if h.Key == k {
				found = true
				break
			}
		}
		if !found {
			return k
		}
	}
	return ""
}

// notRead says why a compressed batch was not read: the budget's limit.
func notRead(in Inflater, err error) string {
	if cut := in.Cut(); cut != "" {
		return "over the record path's " + cut
	}
	if errors.Is(err, records.ErrOverBudget) {
		return "over the record path's max_decompressed_bytes"
	}
	return err.Error()
}

func allowedCodec(allowed []string, codec int) bool {
	for _, a := range allowed {
		if codecNumber(a) == codec {
			return true
		}
	}
	return false
}

func codecName(codec int) string {
	if codec >= 0 && codec < len(codecNames) {
		return codecNames[codec]
	}
	return "codec " + strconv.Itoa(codec)
}

// fallbackInflater bounds a request's inflation when the relay gave no
// budget (tests, tools): 1 MiB, one inflation slot, waited for briefly.
type fallbackInflater struct {
	bytes int
	cut   string
}

func (f *fallbackInflater) Inflate(dst []byte, codec int, data []byte) ([]byte, error) {
	if !records.WaitSlot(time.Second) {
		f.cut = "decoders_busy"
		return dst, errors.New("no decoder free")
	}
	defer records.GiveSlot()
	out, err := records.Inflate(dst, codec, data, f.bytes)
	f.bytes -= len(out) - len(dst)
	if errors.Is(err, records.ErrOverBudget) {
		f.cut = "max_decompressed_bytes"
	}
	return out, err
}

func (f *fallbackInflater) Cut() string { return f.cut }
