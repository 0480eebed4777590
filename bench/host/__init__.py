"""Host side: image build, container and native runners, capability detection."""
