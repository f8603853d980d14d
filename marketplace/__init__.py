"""The marketplace: images and one-click clone, reviews and the authors' share; the model and dataset hub with its
Hugging Face API; inference templates."""
