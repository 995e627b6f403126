package wire

import "testing"

func TestDecodeFactsRejects(t *testing.T) {
	tests := []struct {
		name string
		m    Message
	}{
		{"wrong phase", Message{Phase: "init", Details: map[string]string{"facts": "{}"}}},
		{"no detail", Message{Phase: PhaseFacts}},
		{"bad json", Message{Phase: PhaseFacts, Details: map[string]string{"facts": "{"}}},
		{"other version", Message{Phase: PhaseFacts, Details: map[string]string{"facts": `{"v":2}`}}},
	}
	for _, tt := range tests {
		if _, err := DecodeFacts(tt.m); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

func TestSSHKeyHash(t *testing.T) {
	base := SSHKeyHash("ssh-ed25519 AAAAkey")
	tests := []struct {
		line string
		same bool
	}{
		{"ssh-ed25519 AAAAkey comment here", true},
		{`no-pty,command="x" ssh-ed25519 AAAAkey c`, true},
		{"ssh-ed25519 AAAAother", false},
		{"ssh-rsa AAAAkey", false},
	}
	for _, tt := range tests {
		if got := SSHKeyHash(tt.line) == base; got != tt.same {
			t.Errorf("SSHKeyHash(%q) same as base = %v, want %v", tt.line, got, tt.same)
		}
	}
	if SSHKeyHash("# comment") != "" || SSHKeyHash("  ") != "" {
		t.Error("comment or blank line hashed")
	}
}
