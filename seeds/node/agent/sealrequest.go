package agent

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// SaveSealRequest writes the seal request a seal command carried to path (0600), where
// agent seal --request reads it.
func SaveSealRequest(path string, req *wire.SealRequest) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing the seal request: %w", err)
	}
	return nil
}

// WriteFailureLog writes the tail of a failed unit's log (or why it could not be read) to
// path, for the host to report.
func WriteFailureLog(path, unitLog string) error {
	tail, err := TailLines(unitLog, wire.LogDetailLines, wire.MaxLogDetailBytes)
	if err != nil {
		tail = err.Error()
	}
	return os.WriteFile(path, []byte(tail+"\n"), 0o644)
}
