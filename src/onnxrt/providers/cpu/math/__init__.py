"""Math kernels beyond the plain element-wise tables: softmax family, Pow, Mod, Clip..."""
