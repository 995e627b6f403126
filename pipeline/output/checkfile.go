package output

import "fmt"

// CheckFile refuses, as Check does, an output file named by flag (-o FILE), before a
// command does any work; a refusal names the flag. "" (no output) is fine.
func CheckFile(flag, path string, inputs ...string) error {
	if path == "" {
		return nil
	}
	if _, err := Check(path, inputs...); err != nil {
		if IsRefused(err) {
			return fmt.Errorf("%s %w", flag, err)
		}
		return err
	}
	return nil
}
