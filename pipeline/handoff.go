package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// OutputRecord is the file, in a stage's output folder, that holds the typed record other
// stages read: paths relative to the folder plus the metadata downstream needs. The record's
// Go type belongs to the stages (stages/internal/handoff); the engine only stores and hands
// back its JSON.
const OutputRecord = "output.json"

// WriteOutput stores v as this stage's output record.
func (e *Env) WriteOutput(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("stage %s: encoding its output record: %w", e.stage, err)
	}
	return os.WriteFile(filepath.Join(e.Out, OutputRecord), append(b, '\n'), 0o644)
}

// ReadOutput decodes the output record of upstream stage into v and returns that stage's
// (read-only) output folder. The stage must be one of this stage's Deps.
func (e *Env) ReadOutput(stage string, v any) (string, error) {
	dir, ok := e.Inputs[stage]
	if !ok {
		return "", fmt.Errorf("stage %s reads the output of %s, which is not one of its dependencies (a wiring bug)", e.stage, stage)
	}
	b, err := os.ReadFile(filepath.Join(dir, OutputRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the %s stage's output has no %s (made by an older snofactory?): rebuild it with --force %s", stage, OutputRecord, stage)
	}
	if err != nil {
		return "", fmt.Errorf("reading the %s stage's output record: %w", stage, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return "", fmt.Errorf("the %s stage's %s: %w", stage, OutputRecord, err)
	}
	return dir, nil
}
