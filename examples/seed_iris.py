"""The seed lesson's script (seeds/003): Iris MLP, SGD, 20 000 full-batch epochs, on the GPU if there is one.

Run it plainly (`python examples/seed_iris.py`) or under the doctor. It records `loss.item()` every
epoch and prints every 100 epochs, exactly as the lesson wrote it: on a GPU each of those reads
is a device synchronisation, and that is what makes this loop slower on a GPU than on a CPU.
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.optim as optim
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 10)  # input layer -> hidden layer
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(10, 3)  # hidden layer -> output layer

    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20000)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--plot", action="store_true", help="show the loss curve (matplotlib)")
    args = parser.parse_args()

    device = torch.device(args.device)
    print(f"Using device: {device}")

    iris = load_iris()
    X_train, X_test, y_train, y_test = train_test_split(iris.data, iris.target, test_size=0.2, random_state=42)
    scaler = MinMaxScaler()
    X_train = scaler.fit_transform(X_train)
    X_test = scaler.transform(X_test)

    # Model and every input on the same device: mixing devices raises a RuntimeError.
    X_train = torch.FloatTensor(X_train).to(device)
    y_train = torch.LongTensor(y_train).to(device)
    X_test = torch.FloatTensor(X_test).to(device)
    y_test = torch.LongTensor(y_test).to(device)

    model = MLP().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01)

    num_epochs = args.epochs
    losses = []
    start_time = time.time()
    for epoch in range(num_epochs):
        outputs = model(X_train)
        loss = criterion(outputs, y_train)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        losses.append(loss.item())  # a host read every epoch: a GPU sync every epoch
        if (epoch + 1) % 100 == 0:
            print(f"Epoch [{epoch + 1}/{num_epochs}], Loss: {loss.item():.4f}")

    time_all = time.time() - start_time  # .item() above already synchronised the device
    print(f"Training time: {time_all:.2f} seconds")

    with torch.no_grad():
        accuracy = (model(X_test).argmax(dim=1) == y_test).float().mean().item()
    print(f"Test accuracy: {accuracy:.2%}")

    if args.plot:
        import matplotlib.pyplot as plt

        plt.plot(range(len(losses)), losses)
        plt.xlabel("Epoch")
        plt.ylabel("Loss")
        plt.title("Training Loss over Epochs")
        plt.show()


if __name__ == "__main__":
    main()
