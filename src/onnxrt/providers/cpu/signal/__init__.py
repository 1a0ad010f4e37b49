"""Signal processing: DFT, STFT, window functions, MelWeightMatrix."""
