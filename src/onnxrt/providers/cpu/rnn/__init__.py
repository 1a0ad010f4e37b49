"""Recurrent layers: RNN, GRU and LSTM (every schema version, both layouts)."""
