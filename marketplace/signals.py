"""What the marketplace asks the apps above it, which connect to it when Django starts."""

from django.dispatch import Signal

# An imported image is about to be removed. Sent with ``image`` and ``slugs`` (the slugs a launch names it by);
# a receiver answers why it may not go yet (text the owner reads, e.g. a queued job boots from it), or None.
image_removal_asked = Signal()
