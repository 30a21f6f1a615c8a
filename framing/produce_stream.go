package framing

import (
	"errors"
	"slices"
	"unsafe"
)

// ProducePartition is one partition named by a Produce request.
type ProducePartition struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
}

// ErrTooWide is returned by StreamProduce for a request naming more topics
// and partitions than the caller keeps: a frame of a few MB can name
// millions, and keeping them all costs far more than the frame.
var ErrTooWide = errors.New("produce names more topics and partitions than kproxy keeps to answer it")

// entryCost is what one partition kept, or one topic read, costs against
// StreamProduce's budget (a topic adds its name's length).
const entryCost = int(unsafe.Sizeof(ProducePartition{}))

// StreamProduce reads a Produce request body (version known to kproxy)
// from s, keeping the topics, partitions and acks and dropping the record
// batches as they arrive, then drops anything left of the frame.
//
// What it keeps is bounded by budget bytes (each partition, and each topic
// with its name, costs about what it takes in memory): past it, it stops
// reading and returns ErrTooWide, with the rest of the frame unread.
func StreamProduce(s *Stream, version int16, budget int) (acks int16, parts []ProducePartition, err error) {
	flex := Flexible(KeyProduce, version)
	spend := func(n int) error {
		if budget -= n; budget < 0 {
			return ErrTooWide
		}
		return nil
	}
	str := func(keep bool) (string, error) { // (compact) nullable string
		var n int
		if flex {
			v, err := s.Uvarint()
			if err != nil {
				return "", err
			}
			n = int(v) - 1
		} else {
			v, err := s.Int16()
			if err != nil {
				return "", err
			}
			n = int(v)
		}
		if n < 0 {
			return "", nil
		}
		if !keep {
			return "", s.Discard(n)
		}
		if err := spend(n); err != nil {
			return "", err
		}
		return s.String(n)
	}
	if version >= 3 {
		if _, err = str(false); err != nil { // transactional_id
			return 0, nil, err
		}
	}
	if acks, err = s.Int16(); err != nil {
		return 0, nil, err
	}
	if _, err = s.Int32(); err != nil { // timeout
		return 0, nil, err
	}
	topics, err := s.length(flex)
	for t := 0; t < topics && err == nil; t++ {
		if err = spend(entryCost); err != nil {
			break
		}
		var p ProducePartition
		if version >= 13 {
			var id []byte
			if id, err = s.next(16); err != nil {
				break
			}
			copy(p.TopicID[:], id)
		} else if p.Topic, err = str(true); err != nil {
			break
		}
		var n int
		if n, err = s.length(flex); err == nil && n > 0 {
			// Sized once: growing by appends would allocate several
			// times what is kept.
			parts = slices.Grow(parts, min(n, max(budget, 0)/entryCost+1))
		}
		for i := 0; i < n && err == nil; i++ {
			if err = spend(entryCost); err != nil {
				break
			}
			if p.Partition, err = s.Int32(); err != nil {
				break
			}
			var size int
			if size, err = s.length(flex); err == nil && size > 0 {
				err = s.Discard(size)
			}
			if err == nil && flex {
				err = s.skipTags()
			}
			parts = append(parts, p)
		}
		if err == nil && flex {
			err = s.skipTags()
		}
	}
	if err != nil {
		return 0, nil, err
	}
	return acks, parts, s.Rest()
}

// length reads an array or bytes length: an int32, or in flexible versions
// a uvarint holding length+1. -1 is null.
func (s *Stream) length(flex bool) (int, error) {
	if flex {
		v, err := s.Uvarint()
		return int(v) - 1, err
	}
	n, err := s.Int32()
	return int(n), err
}

func (s *Stream) skipTags() error {
	n, err := s.Uvarint()
	for i := uint64(0); i < n && err == nil; i++ {
		if _, err = s.Uvarint(); err != nil {
			break
		}
		var size uint64
		if size, err = s.Uvarint(); err == nil {
			err = s.Discard(int(size))
		}
	}
	return err
}
