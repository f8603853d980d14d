"""What the team app tells the apps above it, which connect to it when Django starts."""

from django.dispatch import Signal

# A person stopped being able to operate a team's resources: they left or were removed, or their role no longer
# operates. Sent inside the change's transaction with ``team`` and ``user``; receivers take back what that person
# still holds of the team's (an endpoint's keys they made, say).
operate_lost = Signal()
