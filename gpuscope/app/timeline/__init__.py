"""The timeline widget (Qt) drawn from the Qt-free models in gpuscope.views."""
