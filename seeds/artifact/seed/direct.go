package seed

import "os"

// directWriter writes through a second, direct handle of a file (openDirect), and through
// the file's own handle where there is none or once the direct one refuses a write.
// Both reach the same file; fsync on either flushes it.
type directWriter struct{ direct, buffered *os.File }

func newDirectWriter(f *os.File) *directWriter {
	return &directWriter{direct: openDirect(f), buffered: f}
}

func (w *directWriter) WriteAt(p []byte, off int64) (int, error) {
	if w.direct != nil {
		n, err := w.direct.WriteAt(p, off)
		if err == nil || !isDirectRefused(err) {
			return n, err
		}
		w.Close()
	}
	return w.buffered.WriteAt(p, off)
}

// Close closes the direct handle; the file's own stays open.
func (w *directWriter) Close() {
	if w.direct != nil {
		w.direct.Close()
		w.direct = nil
	}
}
